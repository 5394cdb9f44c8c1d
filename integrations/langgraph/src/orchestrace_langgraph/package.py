_instruments = ("langgraph >= 1.0",)
