"""A package whose training entry point is launched with `-m trainpkg.train`."""
