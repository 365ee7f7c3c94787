"""The ``dpledger`` command: ``main`` (in :mod:`dpledger.cli.main`) returns the exit code.

``plan`` holds ``dpledger plan`` and ``dpledger calibrate``; ``demo`` holds
``dpledger demo``; ``argtypes`` the ASCII number types of every option. Nothing else in
dpledger imports this package.
"""
