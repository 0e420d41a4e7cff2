import sys

from domino_train.report.cli import main

sys.exit(main())
