#!/bin/bash
wc -c < /app/docs/amber_jungle.txt > /app/crater.txt
