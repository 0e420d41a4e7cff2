from domino_train.cli.data import main

main()
