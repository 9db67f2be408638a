print('violet')
