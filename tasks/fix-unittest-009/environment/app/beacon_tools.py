def yell(text):
    return text.lower() + '!'
