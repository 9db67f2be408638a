print('garnet')
