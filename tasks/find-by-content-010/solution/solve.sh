#!/bin/bash
grep -rl 'granite-8189' /app/crater > /app/matches.txt
