#!/bin/bash
chmod 444 /app/candle/rapid_coral.txt
chmod 700 /app/candle/noble_copper.sh
chmod 600 /app/candle/crimson_cliff.key
