#!/bin/bash
mkdir -p /app/tulip && printf '%s\n' 'bold wolf cactus' 'ember stop candle quartz clover' 'kiwi quiet granite ember' 'planet falcon push sunny' > /app/tulip/windy_tulip.txt
