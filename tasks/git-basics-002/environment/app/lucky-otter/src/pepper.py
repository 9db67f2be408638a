print('pepper')
