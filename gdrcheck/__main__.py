from gdrcheck.cli.entry import main

main()
