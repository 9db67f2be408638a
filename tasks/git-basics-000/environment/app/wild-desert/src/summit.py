print('summit')
