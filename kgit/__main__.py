from kgit.cli.main import main

main()
