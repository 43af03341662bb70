from soda.cli.entry import main

main()
