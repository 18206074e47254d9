from gdrcheck.entry import main

main()
