def describe() -> str:
    return "pkgjob"
