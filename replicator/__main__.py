from replicator.cli.main import main

main()
