#!/bin/bash
wc -c < /app/docs/proud_dolphin.txt > /app/answer.txt
