print('jasper')
