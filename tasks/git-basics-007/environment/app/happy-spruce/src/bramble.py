print('bramble')
