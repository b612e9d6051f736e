"""Which model is called and how: streamed or not, with the tools or without, and what an empty answer means."""
