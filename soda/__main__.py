from soda.cli import main

main()
