from kgit.cli import main

main()
