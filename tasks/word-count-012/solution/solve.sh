#!/bin/bash
wc -c < /app/docs/misty_lagoon.txt > /app/answer.txt
