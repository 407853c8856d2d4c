# Conversation and Message arrive with the answering feature (issue 7).
