"""Sample toolproof plugin: the ``sample-quotes`` reasoner, ``sample-statement-quotes`` check."""
