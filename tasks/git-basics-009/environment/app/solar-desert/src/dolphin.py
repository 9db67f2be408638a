print('dolphin')
