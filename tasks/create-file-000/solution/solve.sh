#!/bin/bash
mkdir -p /app/forest && printf '%s\n' 'proud hazel' 'hidden candle swan build arrow' 'orbit badge solar' 'sunny snowy jolly' > /app/forest/rustic_quartz.txt
