print('pebble')
