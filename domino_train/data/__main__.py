from domino_train.data.cli import main

main()
