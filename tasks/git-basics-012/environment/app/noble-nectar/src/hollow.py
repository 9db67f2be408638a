print('hollow')
