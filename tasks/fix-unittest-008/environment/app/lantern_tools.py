def shout(text):
    return text.lower() + '!'
