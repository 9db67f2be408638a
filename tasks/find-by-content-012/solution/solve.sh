#!/bin/bash
grep -rl 'moss-8361' /app/candle > /app/matches.txt
