print('nutmeg')
