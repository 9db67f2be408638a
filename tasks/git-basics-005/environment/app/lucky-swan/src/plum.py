print('plum')
