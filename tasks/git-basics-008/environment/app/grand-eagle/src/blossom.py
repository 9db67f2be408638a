print('blossom')
