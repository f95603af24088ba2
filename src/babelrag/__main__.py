from babelrag.cli import main

main()
