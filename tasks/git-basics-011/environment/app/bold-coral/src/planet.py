print('planet')
