from soda.cli.main import main

main()
