#!/bin/bash
mkdir -p /app/hazel && printf '%s\n' 'cactus zebra maple meadow' 'lantern bison build grand write' 'calm rabbit' 'fern walnut' > /app/hazel/solar_candle.txt
