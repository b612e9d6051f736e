"""The running summary of what left the history window: written beside the conversation, handed over at a cut."""
