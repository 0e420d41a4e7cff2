from domino_train.cli.train import main

main()
