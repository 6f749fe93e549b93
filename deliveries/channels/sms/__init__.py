"""SMS: the channel module (channel.py) and SMPP 3.4 beneath it (smpp/)."""
