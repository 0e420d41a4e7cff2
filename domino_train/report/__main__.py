import sys

from domino_train.cli.report import main

sys.exit(main())
