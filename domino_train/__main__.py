from domino_train.train import main

main()
