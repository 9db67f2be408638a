def exclaim(text):
    return text.lower() + '!'
