"""SMS over SMPP 3.4: the persistent bind, answer classification, text encoding,
adaptive sending rate and delivery receipts. The channel module is
deliveries/channels/sms/channel.py.
"""
