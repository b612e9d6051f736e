"""What the copilot asks a model server besides chat: its tokenizer, the tools' cost, its chat template's
habits, whether it is the lab's own; and what it taught us, remembered per server."""
