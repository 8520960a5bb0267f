"""One module per CLI command. Each exposes `add_parser(subparsers)` and `main(args) -> int`."""
