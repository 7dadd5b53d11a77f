import tessera

def test_import():
    assert issubclass(tessera.MalformedError, tessera.TesseraError)
